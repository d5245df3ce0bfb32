import math


def main():
    total = sum(instances.get(sandbox="dev", name=n).memory_mb for n in ["gui", "api", "db"])
    return math.ceil(total / 1024)
