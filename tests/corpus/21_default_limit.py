def main():
    return len(instances.search(text="10."))
