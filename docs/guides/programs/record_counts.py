"""The count of each record whose key starts with `prefix`, by key."""


def main(*, prefix: str = "") -> dict[str, int]:
    counts = {}
    for key in records.keys():
        if key.startswith(prefix):
            counts[key] = records.lookup(key=key)["count"]
    return counts
