def main():
    inst = instances.get(sandbox="dev", name="api")
    return "{} has {:d} cpus and {} MiB".format(inst.name, inst.cpus, inst.memory_mb)
