"""A request the twin refuses with HTTP 400, as SGLang does: the message names the field and the reason. Raised
while a body is parsed (http/) and while its output constraint is compiled (structured/)."""


class BadRequest(ValueError):
    pass
