def check(total):
    if total < 0:
        raise ValueError("negative")
    return total


def main():
    return check(instances.list()["total"])
