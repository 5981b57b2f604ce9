"""The latitude and longitude of this machine's public address (upstream's ``zeus.utils.lat_lon``), from ipinfo.io."""

from __future__ import annotations

import logging

import requests

logger = logging.getLogger(__name__)

#: The service asked (upstream's).
IP_INFO_URL = "http://ipinfo.io/json"


def get_ip_lat_long() -> tuple[float, float]:
    """(latitude, longitude) of the public IP address; a failed request's ``RequestException`` propagates."""
    try:
        loc = requests.get(IP_INFO_URL, timeout=30).json()["loc"]
    except requests.exceptions.RequestException as e:
        logger.exception("Failed to retrieve current latitude and longitude of IP: %s", e)
        raise
    lat, long = (float(part) for part in loc.split(","))
    logger.info("Retrieved latitude and longitude: %s, %s", lat, long)
    return lat, long
