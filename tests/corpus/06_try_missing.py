def main():
    try:
        return instances.get(sandbox="dev", name="nope").name
    except RuntimeError as e:
        return f"not found: {e}"
