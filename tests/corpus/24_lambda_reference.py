def main():
    fetch = lambda name: instances.get(sandbox="prod", name=name)
    return fetch("db").owner
