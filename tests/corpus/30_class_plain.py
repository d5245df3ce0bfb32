class Tally:
    def __init__(self):
        self.count = 0

    def add(self, n):
        self.count += n


def main():
    tally = Tally()
    for s in sandboxes.list():
        tally.add(s["instances"])
    return tally.count
