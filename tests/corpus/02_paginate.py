def main():
    names = []
    offset = 0
    while True:
        page = instances.list(limit=4, offset=offset)
        names.extend(item["name"] for item in page["items"])
        if page["next_offset"] is None:
            break
        offset = page["next_offset"]
    return len(names)
