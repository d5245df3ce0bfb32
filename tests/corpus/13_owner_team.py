def main():
    platform = owners.list(team="platform")
    return [o.name for o in platform]
