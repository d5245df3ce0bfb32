def main():
    page = instances.list(state="running")
    return [f"{i['sandbox']}/{i['name']}" for i in page["items"]]
