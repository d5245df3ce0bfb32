def main():
    return instances.tag(sandbox="dev", name="db", tags=("primary", "backend"))
