from dataclasses import dataclass


@dataclass
class Row:
    name: str
    cpus: int


def main():
    rows = [Row(i["name"], instances.get(sandbox=i["sandbox"], name=i["name"]).cpus)
            for i in instances.list(sandbox="dev")["items"]]
    rows.sort(key=lambda r: (-r.cpus, r.name))
    return [r.name for r in rows]
