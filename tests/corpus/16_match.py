def main():
    inst = instances.get(sandbox="dev", name="db")
    match inst.state:
        case "running":
            return "up"
        case _:
            return "down"
