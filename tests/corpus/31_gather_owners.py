import asyncio


async def main():
    ids = ["u-ada", "u-alan", "u-grace"]
    people = await asyncio.gather(*[owners.get(id=i) for i in ids])
    return [p.team for p in people]
