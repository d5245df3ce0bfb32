def main():
    return {s["name"]: s["instances"] for s in sandboxes.list()}
