def main():
    inst = instances.get(sandbox="dev", name="gui")
    return {nic.name: nic.address for nic in inst.nics}
