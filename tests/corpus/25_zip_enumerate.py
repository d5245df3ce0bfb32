def main():
    items = instances.list(sandbox="dev")["items"]
    return [f"{i}:{item['name']}" for i, item in enumerate(items)][:3]
