"""CLI: `geosleuth tools list`, `geosleuth tool NAME --args JSON`, `geosleuth mcp`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from geosleuth.bounds.extras import install_line
from geosleuth.cli.options import AlwaysJsonOpt

ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config", "-c", help="Tool settings file (YAML or TOML; a `tools:` section or the whole file)."
    ),
]


def _settings(config: Path | None) -> Any:
    from geosleuth.tools.config import ToolSettings

    try:
        return ToolSettings.load(config)
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


def tools_list(
    config: ConfigOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List the tools, the provider each uses, and whether it is ready."""
    from geosleuth.tools.registry import build_registry, provider_status

    settings = _settings(config)
    registry = build_registry(
        settings.model_copy(
            update={"cache": settings.cache.model_copy(update={"backend": "none", "mode": "off"})}
        )
    )
    rows = provider_status(settings)
    for row in rows:
        tool = registry.get(row["tool"])
        row["description"] = tool.description if tool else ""
    if as_json:
        typer.echo(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("tool", "provider", "status", "description")
    for row in rows:
        style = "green" if row["status"] == "ready" else "yellow"
        table.add_row(row["tool"], row["provider"], f"[{style}]{row['status']}[/]", row["description"])
    Console().print(table)


def tools_cache(
    action: Annotated[
        str, typer.Argument(help="stats, purge (drop expired entries) or clear (drop all).")
    ] = "stats",
    config: ConfigOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Inspect or trim the tool cache that the settings select."""
    from geosleuth.tools.base import ToolError
    from geosleuth.tools.cache import RedisCache, SQLiteCache

    if action not in {"stats", "purge", "clear"}:
        typer.echo(f"error: unknown action {action!r}: use stats, purge or clear", err=True)
        raise typer.Exit(2)
    settings = _settings(config)
    if settings.cache.backend == "none":
        typer.echo("error: the tool cache is off (cache.backend is none)", err=True)
        raise typer.Exit(2)
    backend: SQLiteCache | RedisCache
    if settings.cache.backend == "redis":
        if not settings.cache.redis_url:
            typer.echo("error: cache.backend is redis but no cache.redis_url is set", err=True)
            raise typer.Exit(2)
        try:
            backend, where = RedisCache(settings.cache.redis_url), "the Redis cache"
        except ValueError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
    else:
        backend, where = SQLiteCache(settings.cache_path()), str(settings.cache_path())
    try:
        removed: int | str | None = None
        if action == "purge":
            removed = backend.purge_expired()
        elif action == "clear":
            backend.clear()
            removed = "all"
        entries = len(backend)
    except ToolError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    if as_json:
        typer.echo(json.dumps({"action": action, "cache": where, "removed": removed, "entries": entries}))
        return
    if removed is not None:
        typer.echo(f"{removed} {'entries' if removed == 'all' else 'expired entries'} removed from {where}")
    typer.echo(f"{entries} entries in {where}")


def tool_run(
    name: Annotated[str, typer.Argument(help="Tool name, e.g. geocode (see `geosleuth tools list`).")],
    args: Annotated[str, typer.Option("--args", "-a", help="Arguments as a JSON object.")] = "{}",
    image: Annotated[
        Path | None, typer.Option("--image", "-i", help="Query image for zoom / OCR / EXIF.")
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Directory for images the tool returns (none written without it)."),
    ] = None,
    scale: Annotated[float, typer.Option(help="Size of the image the model saw / original size.")] = 1.0,
    bbox_convention: Annotated[str, typer.Option(help="absolute or relative1000.")] = "absolute",
    config: ConfigOpt = None,
    as_json: AlwaysJsonOpt = False,
) -> None:
    """Run one tool and print its result as JSON (images are written to files)."""
    del as_json  # the output is JSON either way
    import asyncio

    from geosleuth.tools.base import ToolContext
    from geosleuth.tools.registry import build_registry

    try:
        arguments = json.loads(args)
    except json.JSONDecodeError as exc:
        typer.echo(f"error: --args is not valid JSON: {exc}", err=True)
        raise typer.Exit(2) from None
    if not isinstance(arguments, dict):
        typer.echo('error: --args must be a JSON object, e.g. \'{"address": "Zürich"}\'', err=True)
        raise typer.Exit(2)
    if image is not None and not image.is_file():
        typer.echo(f"error: image not found: {image}", err=True)
        raise typer.Exit(2)
    if bbox_convention not in {"absolute", "relative1000"}:
        typer.echo("error: --bbox-convention must be absolute or relative1000", err=True)
        raise typer.Exit(2)
    settings = _settings(config)
    try:
        registry = build_registry(settings)
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if name not in registry:
        typer.echo(f"error: unknown tool {name!r}; available: {', '.join(registry.names())}", err=True)
        raise typer.Exit(2)
    ctx = ToolContext(
        image_path=str(image) if image else None,
        model_scale=scale,
        bbox_convention=bbox_convention,  # type: ignore[arg-type]
        artifacts_dir=out,
        settings=settings,
    )
    result = asyncio.run(registry.call(name, arguments, ctx))
    paths: list[str] = []
    if result.images and out is not None:  # written only where the user said
        out.mkdir(parents=True, exist_ok=True)
        for i, im in enumerate(result.images):
            path = out / f"{name}-{i}.png"
            im.save(path)
            paths.append(str(path))
    elif result.images:
        sizes = ", ".join(f"{im.size[0]}x{im.size[1]}" for im in result.images)
        typer.echo(
            f"note: {len(result.images)} image(s) ({sizes}) not saved: pass --out DIR to write them", err=True
        )
    doc = {
        "tool": name,
        "ok": result.ok,
        "provider": result.provider,
        "cache_hit": result.cache_hit,
        "latency_s": round(result.latency_s, 4),
        "text": result.text,
        "error": result.error,
        "data": result.data,
        "images": paths,
    }
    typer.echo(json.dumps(doc, ensure_ascii=False, indent=2, default=str))
    if not result.ok:
        raise typer.Exit(1)


def mcp_serve(
    transport: Annotated[str, typer.Option(help="stdio or http (streamable HTTP).")] = "stdio",
    host: Annotated[str, typer.Option(help="HTTP host.")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(help="HTTP port (not vLLM's 8000).")
    ] = 8808,  # mcp_server.DEFAULT_HTTP_PORT
    path: Annotated[str, typer.Option(help="HTTP path of the MCP endpoint.")] = "/mcp",
    image: Annotated[
        Path | None, typer.Option("--image", help="Default query image for zoom / OCR / EXIF.")
    ] = None,
    image_root: Annotated[
        list[Path] | None,
        typer.Option(
            "--image-root",
            help="Directory whose regular files clients may name as image_path (repeatable). "
            "Default: none, images only as image_base64.",
        ),
    ] = None,
    image_format: Annotated[str, typer.Option(help="Format of returned images: jpeg or webp.")] = "jpeg",
    max_image_bytes: Annotated[
        int, typer.Option(help="Size cap of each returned image as base64 (quality, then size, shrink).")
    ] = 1_000_000,
    max_input_pixels: Annotated[
        int, typer.Option(help="Largest query image accepted, in pixels.")
    ] = 64_000_000,
    max_input_bytes: Annotated[
        int,
        typer.Option(
            help="Largest query image accepted, in bytes (file or decoded base64); sets the HTTP body limit."
        ),
    ] = 30_000_000,
    bbox_convention: Annotated[
        str, typer.Option(help="Zoom boxes: absolute (pixels of the image) or relative1000.")
    ] = "absolute",
    tools: Annotated[str | None, typer.Option(help="Comma-separated subset of tools to serve.")] = None,
    config: ConfigOpt = None,
) -> None:
    """Serve the tools over MCP (stdio or streamable HTTP)."""
    import anyio

    from geosleuth.tools.registry import build_registry

    try:
        from geosleuth.tools.mcp_server import ImagePolicy, build_server, serve_http, serve_stdio
    except ImportError as exc:
        typer.echo(f"error: the MCP server needs the mcp package ({exc}): {install_line('mcp')}", err=True)
        raise typer.Exit(2) from None

    if transport not in {"stdio", "http"}:
        typer.echo("error: --transport must be stdio or http", err=True)
        raise typer.Exit(2)
    if bbox_convention not in {"absolute", "relative1000"}:
        typer.echo("error: --bbox-convention must be absolute or relative1000", err=True)
        raise typer.Exit(2)
    if image_format not in {"jpeg", "webp"}:
        typer.echo("error: --image-format must be jpeg or webp", err=True)
        raise typer.Exit(2)
    if max_image_bytes < 1000 or max_input_pixels < 1 or max_input_bytes < 1:
        typer.echo(
            "error: --max-image-bytes must be at least 1000, "
            "--max-input-pixels and --max-input-bytes positive",
            err=True,
        )
        raise typer.Exit(2)
    if image is not None and not image.is_file():
        typer.echo(f"error: image not found: {image}", err=True)
        raise typer.Exit(2)
    roots = list(image_root or [])
    missing = [str(r) for r in roots if not r.is_dir()]
    if missing:
        typer.echo(f"error: --image-root is not a directory: {', '.join(missing)}", err=True)
        raise typer.Exit(2)
    names = [n.strip() for n in tools.split(",") if n.strip()] if tools else None
    try:
        registry = build_registry(_settings(config), names=names)
    except (KeyError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    policy = ImagePolicy(
        roots=tuple(roots),
        default_image=image,
        output_format=image_format,  # type: ignore[arg-type]
        max_output_bytes=max_image_bytes,
        max_input_pixels=max_input_pixels,
        max_input_bytes=max_input_bytes,
    )
    server = build_server(registry, bbox_convention=bbox_convention, policy=policy)
    if transport == "stdio":
        anyio.run(serve_stdio, server)
    else:
        anyio.run(lambda: serve_http(server, host=host, port=port, path=path, policy=policy))


def register(app: typer.Typer) -> None:
    """Attach this module's commands to the main app."""
    tools_app = typer.Typer(help="Inspect the tool suite.", no_args_is_help=True)
    tools_app.command("list")(tools_list)
    tools_app.command("cache")(tools_cache)
    app.add_typer(tools_app, name="tools")
    app.command("tool")(tool_run)
    app.command("mcp")(mcp_serve)
