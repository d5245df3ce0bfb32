def main():
    instances_seen = []
    for item in instances.list(sandbox="prod")["items"]:
        instances_seen.append(item["name"])
    return instances_seen
