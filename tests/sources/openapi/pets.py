"""The tests' own REST API: a pet store with an OpenAPI 3.1 document in YAML (one schema
in a file of its own), served by uvicorn on loopback. It records every request as it
arrived (raw path, query, headers), and plants the canary where only the host may see it:
in undeclared result keys, undeclared error fields, a 500 page and its headers."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, quote_plus, unquote, unquote_plus

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route

from codemode import serving
from tests.conftest import CANARY

SPEC = """
openapi: 3.1.0
info: {title: Pets, version: "1"}
servers: [{url: /v1}]
security: [{bearer: []}]
components:
  securitySchemes:
    bearer: {type: http, scheme: bearer}
    key: {type: apiKey, in: query, name: api_key}
    session: {type: apiKey, in: cookie, name: sid}
    basic: {type: http, scheme: basic}
    header_key: {type: apiKey, in: header, name: X-Api-Key}
  schemas:
    Echo:
      type: object
      properties:
        path: {type: string}
        query: {type: string}
        cookie: {type: [string, "null"]}
        ids: {type: [string, "null"]}
    Pet:
      type: object
      required: [id, name]
      properties:
        id: {type: integer, readOnly: true}
        name: {type: string, minLength: 1, description: What the pet answers to.}
        tag: {type: [string, "null"]}
        owner: {$ref: "common.yaml#/Owner"}
    Error:
      type: object
      properties:
        code: {type: integer}
        message: {type: string}
    Mirror:
      type: object
      properties:
        authorization: {type: [string, "null"]}
        token: {type: [string, "null"]}
        pair: {type: [string, "null"]}
        password: {type: [string, "null"]}
        sid: {type: [string, "null"]}
        lang: {type: [string, "null"]}
        api_key: {type: [string, "null"]}
        query: {type: string}
        query_lower: {type: string}
        key: {type: [string, "null"]}
        key_unquoted: {type: [string, "null"]}
        key_quoted_lower: {type: [string, "null"]}
        key_quote_plus: {type: [string, "null"]}
        accept: {type: [string, "null"]}
        tenant: {type: [string, "null"]}
paths:
  /pets:
    get:
      operationId: listPets
      tags: [pets]
      summary: List the pets.
      parameters:
        - {name: limit, in: query, schema: {type: integer, minimum: 1, maximum: 100}}
        - {name: tags, in: query, schema: {type: array, items: {type: string}}}
        - {name: kind, in: query, schema: {type: string, enum: [cat, dog]}}
        - {name: X-Trace, in: header, schema: {type: string}}
        - {name: X-Api-Key, in: header, schema: {type: string}}
      responses:
        200:
          description: The pets.
          content:
            application/json:
              schema: {type: array, items: {$ref: "#/components/schemas/Pet"}}
    post:
      operationId: createPet
      tags: [pets]
      summary: Add a pet.
      x-codemode-hints: {readOnlyHint: true, destructiveHint: false}
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: "#/components/schemas/Pet"}
      responses:
        "201":
          description: Made.
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Pet"}
        4XX:
          description: Refused.
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Error"}
  /pets/{petId}:
    parameters:
      - {name: petId, in: path, required: true, schema: {type: string}}
    get:
      operationId: showPetById
      tags: [pets]
      responses:
        "200":
          description: The pet.
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Pet"}
        "404":
          description: No such pet.
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Error"}
    delete:
      tags: [admin]
      security: [{basic: []}]
      responses:
        "204": {description: Gone.}
  /search:
    get:
      operationId: search
      security: [{key: []}, {session: []}]
      parameters:
        - {name: filter, in: query, style: deepObject, explode: true,
           schema: {type: object, properties: {color: {type: string}, size: {type: integer}}}}
        - {name: ids, in: query, style: pipeDelimited, explode: false,
           schema: {type: array, items: {type: integer}}}
        - {name: ids, in: header, schema: {type: string}}
        - {name: theme, in: cookie, schema: {type: string}}
      responses:
        "200":
          description: What the request was.
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Echo"}
  /shelves/{shelf}/{slot}:
    get:
      operationId: getSlot
      parameters:
        - {name: shelf, in: path, required: true, style: label, schema: {type: array, items: {type: string}}}
        - {name: slot, in: path, required: true, style: matrix, explode: true,
           schema: {type: object, properties: {row: {type: integer}, col: {type: integer}}}}
      responses:
        "200":
          description: What the request was.
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Echo"}
  /notes:
    put:
      operationId: putNotes
      requestBody:
        content:
          application/json:
            schema: {type: array, items: {type: string}, maxItems: 3}
      responses:
        "200":
          description: The count.
          content:
            application/json:
              schema: {type: object, properties: {count: {type: integer}}}
  /boom:
    get:
      operationId: boom
      responses:
        "200": {description: Never.}
        "500":
          description: Declared, yet a 5xx says its status only.
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Error"}
  /slow:
    get:
      operationId: slow
      parameters:
        - {name: seconds, in: query, schema: {type: number}}
      responses:
        "200":
          description: Late.
          content:
            application/json:
              schema: {type: object, properties: {waited: {type: number}}}
  /broken:
    get:
      operationId: broken
      responses:
        "200":
          description: A body its schema refuses.
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Pet"}
  /readme:
    get:
      operationId: readme
      responses:
        "200":
          description: Text.
          content:
            text/plain: {schema: {type: string}}
  /logo:
    get:
      operationId: logo
      responses:
        "200":
          description: An image.
          content:
            image/png: {}
  /away:
    get:
      operationId: away
      responses:
        "200": {description: Never reached.}
  /login:
    get:
      operationId: login
      parameters:
        - {name: user, in: query, required: true, schema: {type: string}}
      responses:
        "204": {description: Logged in (a session cookie).}
  /whoami:
    get:
      operationId: whoami
      responses:
        "200":
          description: The session cookie the request carried.
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Echo"}
  /gone:
    get:
      operationId: gone
      responses:
        "200": {description: Never.}
        "410": {description: Gone, with no body declared.}
  /drip:
    get:
      operationId: drip
      responses:
        "200":
          description: One byte at a time.
          content:
            application/json:
              schema: {type: array, items: {type: integer}}
  /deep:
    get:
      operationId: deep
      responses:
        "200":
          description: Nested too deeply to parse.
          content:
            application/json: {}
  /host:
    get:
      operationId: host
      parameters:
        - {name: Host, in: header, schema: {type: string}}
        - {name: Content-Length, in: header, schema: {type: string}}
        - {name: api_key, in: query, schema: {type: string}}
      responses:
        "200":
          description: What the request was.
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Echo"}
  /bomb:
    get:
      operationId: bomb
      parameters:
        - {name: encoding, in: query, schema: {type: string}}
      responses:
        "200":
          description: A small body that inflates to a large one.
          content:
            application/json:
              schema: {type: array, items: {type: string}}
  /mirror:
    get:
      operationId: mirror
      security: [{key: []}]
      parameters:
        - {name: fail, in: query, schema: {type: boolean}}
      responses:
        "200":
          description: What the request carried, spelled as APIs echo it.
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Mirror"}
        "400":
          description: Some of it, quoted in an error.
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Error"}
  /hop:
    get:
      operationId: hop
      security: [{key: []}]
      parameters:
        - {name: to, in: query, required: true, schema: {type: string}}
      responses:
        "200":
          description: What the request the redirect led to carried.
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Mirror"}
  /nothing:
    get:
      operationId: nothingSaid
      responses:
        "200":
          description: A body, which the server leaves out (a 204).
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Echo"}
    post:
      operationId: done
      responses:
        "200": {description: Done, with no body declared (the server answers 204).}
  /huge:
    get:
      operationId: huge
      responses:
        "200":
          description: Too much.
          content:
            application/json:
              schema: {type: array, items: {type: string}}
"""

COMMON = """
Owner:
  type: object
  properties:
    login: {type: string}
"""


@dataclass
class Seen:
    """One request as the server got it."""

    method: str
    raw_path: str
    query: str
    headers: dict[str, str]


@dataclass
class PetStore:
    url: str
    """The server's origin (`http://127.0.0.1:PORT`)."""
    seen: list[Seen] = field(default_factory=list)
    in_flight: dict[float, int] = field(default_factory=dict)
    """Requests of `/slow` being answered, by the seconds they wait."""
    most_in_flight: dict[float, int] = field(default_factory=dict)

    @property
    def spec_url(self) -> str:
        return self.url + "/openapi.yaml"

    def paths(self) -> list[str]:
        return [s.raw_path for s in self.seen if not s.raw_path.endswith(".yaml")]


def app(store: PetStore) -> Starlette:
    pets: dict[str, dict[str, Any]] = {
        "1": {"id": 1, "name": "Rex", "tag": None, "owner": {"login": "ada"}, "vault": CANARY}
    }

    def record(request: Request) -> None:
        store.seen.append(
            Seen(
                request.method,
                request.scope["raw_path"].decode(),
                request.scope["query_string"].decode(),
                dict(request.headers),
            )
        )

    async def spec(request: Request) -> Response:
        record(request)
        return PlainTextResponse(SPEC, media_type="application/yaml")

    async def common(request: Request) -> Response:
        record(request)
        return PlainTextResponse(COMMON, media_type="application/yaml")

    async def list_pets(request: Request) -> Response:
        record(request)
        return JSONResponse(list(pets.values()))

    async def create_pet(request: Request) -> Response:
        record(request)
        body = await request.json()
        if body.get("name") == "taken":
            return JSONResponse({"code": 409, "message": "name taken", "trace": CANARY}, 409)
        if body.get("name") == "echo":  # an error that quotes the request's credential
            said = f"bad token {request.headers.get('authorization')}"
            return JSONResponse({"code": 400, "message": said}, 400)
        pet = {"id": len(pets) + 1, **body, "vault": CANARY}
        pets[str(pet["id"])] = pet
        return JSONResponse(pet, 201)

    async def show(request: Request) -> Response:
        record(request)
        pet = pets.get(request.path_params["petId"])
        if pet is None:
            return JSONResponse({"code": 404, "message": "no such pet", "trace": CANARY}, 404)
        return JSONResponse(pet)

    async def delete(request: Request) -> Response:
        record(request)
        pets.pop(request.path_params["petId"], None)
        return Response(status_code=204)

    async def echo(request: Request) -> Response:
        record(request)
        return JSONResponse(
            {
                "path": request.scope["raw_path"].decode(),
                "query": request.scope["query_string"].decode(),
                "cookie": request.headers.get("cookie"),
                "ids": request.headers.get("ids"),
            }
        )

    async def notes(request: Request) -> Response:
        record(request)
        return JSONResponse({"count": len(await request.json())})

    async def boom(request: Request) -> Response:
        record(request)
        return JSONResponse({"code": 500, "message": CANARY}, 500, headers={"x-debug": CANARY})

    async def slow(request: Request) -> Response:
        record(request)
        seconds = float(request.query_params.get("seconds", "0"))
        store.in_flight[seconds] = store.in_flight.get(seconds, 0) + 1
        most = max(store.most_in_flight.get(seconds, 0), store.in_flight[seconds])
        store.most_in_flight[seconds] = most
        try:
            await asyncio.sleep(seconds)
        finally:
            store.in_flight[seconds] -= 1
        return JSONResponse({"waited": seconds})

    async def broken(request: Request) -> Response:
        record(request)
        return JSONResponse({"id": "not a number", "name": CANARY})

    async def readme(request: Request) -> Response:
        record(request)
        return PlainTextResponse("Pets are friends.")

    async def logo(request: Request) -> Response:
        record(request)
        return Response(b"\x89PNG" + b"\0" * 60, media_type=f"x-{CANARY}/png")

    async def away(request: Request) -> Response:
        record(request)
        return RedirectResponse("http://localhost:9/steal", 302)

    bomb_body = gzip.compress(b'["' + b"0" * 100_000_000 + b'"]', 9)  # ~100 KB

    async def bomb(request: Request) -> Response:
        record(request)
        encoding = request.query_params.get("encoding", "gzip")
        return Response(
            bomb_body, headers={"content-encoding": encoding}, media_type="application/json"
        )

    async def login(request: Request) -> Response:
        record(request)
        response = Response(status_code=204)
        response.set_cookie("session", request.query_params["user"])
        return response

    async def gone(request: Request) -> Response:
        record(request)
        return JSONResponse({"detail": CANARY}, 410)

    async def drip(request: Request) -> Response:
        record(request)

        async def slowly() -> Any:
            yield b"["
            for n in range(30):
                await asyncio.sleep(0.2)
                yield f"{n},".encode()
            yield b"0]"

        return StreamingResponse(slowly(), media_type="application/json")

    async def deep(request: Request) -> Response:
        record(request)
        return Response(b"[" * 200_000 + b"]" * 200_000, media_type="application/json")

    async def mirror(request: Request) -> Response:
        record(request)
        said = mirrored(request)
        if request.query_params.get("fail") == "true":  # some of it quoted, all undeclared
            quoted = [said["token"], said["sid"], json.dumps(said["key"])]
            message = f"refused {' '.join(map(str, quoted))} {said['key_quoted_lower']}"
            return JSONResponse({"code": 400, "message": message, "trace": said}, 400)
        return JSONResponse(said)

    async def hop(request: Request) -> Response:
        record(request)
        return RedirectResponse(request.query_params["to"], 302)

    async def nothing(request: Request) -> Response:
        record(request)
        return Response(status_code=204)

    async def huge(request: Request) -> Response:
        record(request)
        return JSONResponse(["x" * 1000] * 20_000)

    return Starlette(
        routes=[
            Route("/openapi.yaml", spec),
            Route("/common.yaml", common),
            Route("/v1/pets", list_pets, methods=["GET"]),
            Route("/v1/pets", create_pet, methods=["POST"]),
            Route("/v1/pets/{petId:path}", show, methods=["GET"]),
            Route("/v1/pets/{petId:path}", delete, methods=["DELETE"]),
            Route("/v1/search", echo),
            Route("/v1/shelves/{rest:path}", echo),
            Route("/v1/notes", notes, methods=["PUT"]),
            Route("/v1/boom", boom),
            Route("/v1/slow", slow),
            Route("/v1/broken", broken),
            Route("/v1/readme", readme),
            Route("/v1/logo", logo),
            Route("/v1/away", away),
            Route("/v1/huge", huge),
            Route("/v1/mirror", mirror),
            Route("/v1/hop", hop),
            Route("/v1/nothing", nothing, methods=["GET", "POST"]),
            Route("/v1/bomb", bomb),
            Route("/v1/login", login),
            Route("/v1/whoami", echo),
            Route("/v1/gone", gone),
            Route("/v1/drip", drip),
            Route("/v1/deep", deep),
            Route("/v1/host", echo),
            Route("/{rest:path}", echo),
        ]
    )


def mirrored(request: Request) -> dict[str, str | None]:
    """What a request carried, each credential as APIs echo one: alone (a token without
    its scheme, a cookie's value, a Basic header's password), percent-encoded with
    lower-case hex, decoded with `unquote` rather than `unquote_plus`."""
    authorization = request.headers.get("authorization", "")
    scheme, _, token = authorization.partition(" ")
    pair = base64.b64decode(token).decode() if scheme == "Basic" else None
    query = request.scope["query_string"].decode()
    raw_key = dict(p.split("=", 1) for p in query.split("&") if "=" in p).get("api_key")
    key = None if raw_key is None else unquote_plus(raw_key)

    def lower(text: str) -> str:
        return re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), text)

    return {
        "authorization": authorization or None,
        "token": token or None,
        "pair": pair,
        "password": None if pair is None else pair.partition(":")[2],
        "sid": request.cookies.get("sid"),
        "lang": request.cookies.get("lang"),
        "api_key": request.headers.get("x-api-key"),
        "query": query,
        "query_lower": lower(query),
        "key": key,
        "key_unquoted": None if raw_key is None else unquote(raw_key),
        "key_quoted_lower": None if key is None else lower(quote(key, safe="")),
        "key_quote_plus": None if key is None else quote_plus(key),
        "accept": request.headers.get("accept"),
        "tenant": request.headers.get("x-tenant"),
    }


@contextmanager
def served(make: Any, *args: Any) -> Iterator[str]:
    """Serve the ASGI app `make(*args)` on a free loopback port; yields its origin."""
    listening = serving.listen("127.0.0.1", 0)  # listening now: requests wait for it
    port = listening.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(make(*args), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listening]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@contextmanager
def pet_store() -> Iterator[PetStore]:
    store = PetStore(url="")
    with served(app, store) as url:
        store.url = url
        yield store
