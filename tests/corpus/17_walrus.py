def main():
    if (n := instances.list(state="stopped")["total"]) > 0:
        return n
    return 0
