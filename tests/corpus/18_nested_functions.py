def main():
    def memory(sandbox):
        return sum(instances.get(sandbox=sandbox, name=i["name"]).memory_mb
                   for i in instances.list(sandbox=sandbox)["items"])
    return {s["name"]: memory(s["name"]) for s in sandboxes.list()}
