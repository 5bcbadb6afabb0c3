"""How a tool's arguments are checked: strictly, as the JSON types the schema states, and only those it takes.

The SDK validates a call's arguments with a pydantic model built from the tool function's
signature (its ``FuncMetadata``); :class:`ContainerJsonOnly` replaces that step for every tool
(:func:`tools.mcp.server.build_server`), and :func:`first_problem` turns what it refuses into the
one sentence of an ``INVALID_INPUT`` tool error.
"""

from __future__ import annotations

import difflib
from typing import Any

from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata
from pydantic import ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError


class ContainerJsonOnly(FuncMetadata):
    """Tool arguments are validated strictly, as the JSON types the schema states.

    - The SDK JSON-decodes string arguments of any non-``str`` parameter: the string ``"null"``
      became None for every ``str | None`` argument (a session named "null" lost its filter), and
      ``refs``, ``entities``, ``metadata``, ``source``, ``exclude_contents`` or ``context`` sent
      as a JSON *string* became a list or an object. Nothing is decoded: a string where the
      schema says array or object is the wrong type.
    - pydantic's lax mode turned ``limit: "10"`` or ``true`` into 10 or 1, ``deep: "yes"`` into
      True and ``salience: true`` into 1.0; strict mode refuses them, so a wrong type is
      INVALID_INPUT naming the argument instead of a silently different call.
    - An argument the tool does not take was dropped: ``visiblity: "agent"`` (a typo) stored a
      private memory shared. It is refused, naming it (with the nearest argument the tool takes),
      before anything else is checked.
    """

    def pre_parse_json(self, data: dict[str, Any]) -> dict[str, Any]:
        return data

    def validate_arguments(self, arguments_to_validate: dict[str, Any]) -> dict[str, Any]:
        taken = [field.alias or name for name, field in self.arg_model.model_fields.items()]
        unknown = [name for name in arguments_to_validate if name not in taken]
        if unknown:
            raise ValidationError.from_exception_data("arguments", [_unknown(name, arguments_to_validate[name], taken)
                                                                    for name in unknown])
        model = self.arg_model.model_validate(self.pre_parse_json(arguments_to_validate), strict=True)
        return model.model_dump_one_level()


def _unknown(name: str, value: object, taken: list[str]) -> InitErrorDetails:
    """The problem of an argument the tool does not take, with the nearest one it does take."""
    near = difflib.get_close_matches(name, taken, n=1)
    hint = f" (did you mean '{near[0]}'?)" if near else ""
    error = PydanticCustomError("unknown_argument", "is not an argument of this tool{hint}", {"hint": hint})
    return {"type": error, "loc": (name,), "input": value}


_JSON_TYPES: tuple[tuple[type, str], ...] = (
    (bool, "a boolean"), (int, "an integer"), (float, "a number"), (str, "a string"),
    (list, "an array"), (dict, "an object"), (type(None), "null"),
)


def _json_type(value: object) -> str:
    return next((name for kind, name in _JSON_TYPES if isinstance(value, kind)), type(value).__name__)


def first_problem(error: ValidationError) -> tuple[str, str]:
    """The first bad argument's path, and one sentence naming it, saying what it got when the type was
    wrong, and how many more problems there are."""
    problems = error.errors()
    first = problems[0]
    field = ".".join(str(part) for part in first["loc"]) or "arguments"
    message = "is required" if first["type"] == "missing" else first["msg"][:1].lower() + first["msg"][1:]
    if first["type"].endswith("_type"):
        message += f" (got {_json_type(first['input'])})"
    more = f" ({len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
    return field, f"Argument '{field}' {message}{more}."
