import json


def main():
    data = sandboxes.list(owner="u-ada")
    return json.loads(json.dumps(data))
