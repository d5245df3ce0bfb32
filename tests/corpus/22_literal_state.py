def main():
    inst = instances.set_state(sandbox="dev", name="worker", state="running")
    return inst.state
