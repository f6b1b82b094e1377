"""A domain installed from "another package": the help-desk domain under another name, found only through the
``agentic_ray.domains`` entry-point group (the registry test fakes the installed distribution's metadata)."""

from __future__ import annotations

from pathlib import Path

from agentic_ray.domains.helpdesk import HelpdeskDomain
from agentic_ray.skills.contracts import domain_file


class PluginDomain(HelpdeskDomain):
    name = "plugin_desk"

    @property
    def contracts_path(self) -> Path:  # a plug-in ships its contracts wherever it likes
        return domain_file("helpdesk")


domain = PluginDomain()
