def main():
    emails = set()
    for item in instances.list(sandbox="prod")["items"]:
        emails.add(owners.get(id=item["owner"]).email)
    return sorted(emails)
