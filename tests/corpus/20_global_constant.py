WANTED = ("gui", "api")


def main():
    return [instances.get(sandbox="staging", name=n).state for n in WANTED]
