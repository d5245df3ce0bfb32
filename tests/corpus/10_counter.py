from collections import Counter


def main():
    page = instances.list(limit=100)
    return dict(Counter(item["state"] for item in page["items"]))
