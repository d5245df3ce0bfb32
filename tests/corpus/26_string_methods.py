def main():
    owner = owners.get(id="u-grace")
    return owner.email.split("@")[1].upper()
