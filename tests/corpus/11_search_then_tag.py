def main():
    hits = instances.search(text="cache")
    return [instances.tag(sandbox=h["sandbox"], name=h["name"], tags=["cached"]) for h in hits][:1]
