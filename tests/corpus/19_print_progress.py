def main():
    for s in sandboxes.list():
        print(s["name"], s["region"])
    return "done"
