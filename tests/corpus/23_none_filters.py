def main():
    return instances.list(sandbox=None, state=None, tag="web", limit=50)["total"]
