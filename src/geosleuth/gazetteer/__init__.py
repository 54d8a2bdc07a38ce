"""Offline gazetteer: GeoNames places and Natural Earth borders, built once from packaged data."""

from geosleuth.gazetteer.index import Gazetteer, NameMatch, get_gazetteer

__all__ = ["Gazetteer", "NameMatch", "get_gazetteer"]
