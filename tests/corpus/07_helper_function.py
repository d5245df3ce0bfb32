def public_ips(inst):
    return [n.address for n in inst.nics if n.network == "public"]


def main():
    return public_ips(instances.get(sandbox="prod", name="api"))
