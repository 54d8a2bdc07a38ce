"""CLI: the offline gazetteer (build it ahead of time, look places up)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from geosleuth.cli.options import AlwaysJsonOpt

gazetteer_app = typer.Typer(help="Offline gazetteer: build, search, reverse.", no_args_is_help=True)


@gazetteer_app.command("build")
def build() -> None:
    """Build the index now (it is otherwise built on first use) and print where it lives; with the
    ``postcodes`` extra installed, the postcode index beside it too (its path on stderr)."""
    from geosleuth.gazetteer import get_gazetteer
    from geosleuth.gazetteer.postcodes import INSTALL_HINT, PACKAGE, get_postcode_index, package_version

    data_dir = get_gazetteer(progress=True).data_dir
    postcodes = get_postcode_index(data_dir)
    if postcodes is None:
        why = f"{PACKAGE} is not installed: {INSTALL_HINT}" if package_version() is None else "see the log"
        typer.echo(f"postcode index: not built ({why})", err=True)
    else:
        meta = postcodes.meta
        typer.echo(
            f"postcode index: {postcodes.path} ({meta['package']}: {meta['package centroid']} postcode "
            f"centroids, {meta['locality match']} by locality, {meta['unmatched']} without coordinates)",
            err=True,
        )
    typer.echo(str(data_dir))


@gazetteer_app.command("search")
def search(
    query: str,
    country: Annotated[str | None, typer.Option(help="Restrict to a country (any name or code).")] = None,
    limit: Annotated[int, typer.Option(min=1, max=100)] = 5,
    as_json: AlwaysJsonOpt = False,
) -> None:
    """Forward geocoding: a place name or comma-separated address to ranked places (JSON)."""
    del as_json  # the output is JSON either way
    from geosleuth.core.countries import resolve_country
    from geosleuth.gazetteer import get_gazetteer

    if not query.strip():
        typer.echo("error: the query is empty; give a place name or an address", err=True)
        raise typer.Exit(2)
    code = None
    if country is not None:
        code = resolve_country(country) or resolve_country(country.strip().upper())  # "ch" as well as "CH"
        if code is None:
            typer.echo(f"error: unknown country {country!r}; give a name or an ISO code, e.g. CH", err=True)
            raise typer.Exit(2)
    places = get_gazetteer(progress=True).search(query, country=code, limit=limit)
    typer.echo(json.dumps([p.model_dump(exclude_none=True) for p in places], ensure_ascii=False, indent=2))


# Negative coordinates ("40.7 -74.0") are numbers, not unknown options.
@gazetteer_app.command("reverse", context_settings={"ignore_unknown_options": True})
def reverse(
    lat: Annotated[float, typer.Argument(min=-90, max=90)],
    lon: Annotated[float, typer.Argument(min=-180, max=180)],
    as_json: AlwaysJsonOpt = False,
) -> None:
    """Reverse geocoding: country (by border polygon), admin levels and nearest town (JSON)."""
    del as_json  # the output is JSON either way
    from geosleuth.gazetteer import get_gazetteer

    place = get_gazetteer(progress=True).reverse(lat, lon)
    typer.echo(json.dumps(place.model_dump(exclude_none=True), ensure_ascii=False, indent=2))


def register(app: typer.Typer) -> None:
    app.add_typer(gazetteer_app, name="gazetteer")
