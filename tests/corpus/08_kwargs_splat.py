def main():
    filters = {"sandbox": "dev", "state": "running"}
    return instances.list(**filters)["total"]
