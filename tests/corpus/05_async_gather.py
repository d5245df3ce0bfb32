import asyncio


async def main():
    page = await instances.list(sandbox="staging")
    details = await asyncio.gather(
        *[instances.get(sandbox=i["sandbox"], name=i["name"]) for i in page["items"]]
    )
    return sum(d.cpus for d in details)
