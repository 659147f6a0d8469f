"""The twin's HTTP surface: aiohttp routes, request parsing, SGLang's native and OpenAI answer shapes."""
