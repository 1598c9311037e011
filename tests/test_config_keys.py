"""A config key is declared once (config/keys.py): its definition alone drives reading and checking, the
allowed keys of its map, the JSON Schema and the config reference; nothing keeps a list of keys besides."""

from __future__ import annotations

import contextlib
import importlib
import pkgutil
from typing import Iterator

import pytest

import config
from config import load_platform, vocabulary
from config.key_types import LARGEST_NUMBER, Integer
from config.keys import REQUIRED, Block, Key, ListOf
from config.load import STACK_CONFIG
from config.load_operators import KAI_SCHEDULER
from config.load_teams import QUEUE_ENTRY, QUEUE_RESOURCES, TEAM
from config.reader import Reader, Section
from config.schema import stack_file_schema
from config.snapshots import SECRETS as BACKUP_SECRETS
from config.vocabulary import project_config
from tests.config_spec import dev_config, eks_config, put, rejected
from tests.test_grafana_sign_in import login_config
from tools.docs import config_reference


def blocks(block: Block = STACK_CONFIG) -> Iterator[Block]:
    """``block`` and every block inside it, each once."""
    seen: dict[int, Block] = {}

    def visit(current: Block) -> None:
        if id(current) in seen:
            return
        seen[id(current)] = current
        for key in current.keys:
            inner = key.type.block if isinstance(key.type, ListOf) else key.type
            if isinstance(inner, Block):
                visit(inner)

    visit(block)
    return iter(seen.values())


@contextlib.contextmanager
def declared(block: Block, key: Key) -> Iterator[Key]:
    """``block`` with one more key while the test runs (blocks are frozen, and shared by identity)."""
    keys = block.keys
    object.__setattr__(block, "keys", keys + (key,))
    try:
        yield key
    finally:
        object.__setattr__(block, "keys", keys)


QUEUE_DEPTH = Key("queueDepth", Integer(minimum=1), 8, "How many pods a test queue holds.", example="16")


def test_a_new_definition_is_an_allowed_key_read_with_its_type_and_default():
    raw = put(dev_config(), "kaiScheduler.queueDepth", 16)
    assert [(issue.key, issue.problem) for issue in rejected(raw).issues] == [
        ("kaiScheduler.queueDepth", "unknown key")]
    with declared(KAI_SCHEDULER, QUEUE_DEPTH):
        load_platform(raw)
        reader = Reader()
        assert reader.section("kaiScheduler", {"queueDepth": 16}, KAI_SCHEDULER).read("queueDepth") == 16
        assert reader.section("kaiScheduler", {}, KAI_SCHEDULER).read("queueDepth") == 8
        assert reader.section("kaiScheduler", {"queueDepth": 0}, KAI_SCHEDULER).read("queueDepth") is None
        assert [(issue.key, issue.problem, issue.fix) for issue in reader.issues] == [
            ("kaiScheduler.queueDepth", "must be >= 1", "set it to a whole number >= 1")]


def test_a_new_definition_is_in_the_schema_and_the_reference_with_its_description():
    with declared(KAI_SCHEDULER, QUEUE_DEPTH):
        kai = stack_file_schema()["properties"]["config"]["properties"]["gpu-tenancy:kaiScheduler"]
        reference = "\n".join(config_reference.render().values())
    assert kai["properties"]["queueDepth"] == {"description": "How many pods a test queue holds.", "type": "integer",
                                               "minimum": 1, "maximum": LARGEST_NUMBER}
    assert "| `queueDepth` | integer ≥ 1 | `8` | `16` | How many pods a test queue holds. |" in reference
    assert "queueDepth" not in "\n".join(config_reference.render().values()), "the definition is gone again"


def test_a_required_definition_is_reported_missing_with_its_fix():
    section = Reader().section("teams[0]", {}, TEAM)
    assert section.read("name") is None
    [issue] = section.reader.issues
    assert (issue.key, issue.problem, issue.fix) == (
        "teams[0].name", "required key is missing", "give the team a DNS-1123 name, e.g. team-nlp")
    assert TEAM["name"].default is REQUIRED


def test_a_derived_default_must_come_from_the_reader_and_an_undeclared_key_cannot_be_read():
    section = Reader().section("teams[0]", {"name": "nlp"}, TEAM)
    with pytest.raises(TypeError, match="derived"):
        section.read("displayName")
    assert section.read("displayName", "nlp") == "nlp"
    with pytest.raises(KeyError, match="nmae"):
        section.read("nmae")


def test_a_retired_key_is_refused_with_what_replaced_it_not_as_unknown():
    reader = Reader()
    reader.section("teams[0]", {"strict": True, "name": "nlp"}, TEAM)
    [issue] = reader.issues
    assert issue.key == "teams[0].strict" and "retired" in issue.problem


# --- no list of keys besides the definitions ------------------------------------------------------


def config_modules() -> Iterator[object]:
    yield config
    for info in pkgutil.iter_modules(config.__path__):
        yield importlib.import_module(f"config.{info.name}")


def test_no_module_of_config_keeps_a_list_of_a_maps_keys():
    """A tuple of a map's keys next to the definitions would be a second place to declare them."""
    key_sets = {frozenset(block.names): block for block in blocks()}
    found = [f"{module.__name__}.{name}" for module in config_modules() if module is not vocabulary
             for name, value in vars(module).items()
             if isinstance(value, (tuple, list, set, frozenset)) and value and all(isinstance(i, str) for i in value)
             and frozenset(value) in key_sets]
    assert found == []


def test_the_queue_keys_mirror_the_fields_of_kais_queue():
    """The one exception: config.vocabulary names the Queue CRD's fields, which the program renders the
    queue keys into; they are KAI's names, not a second declaration of the keys."""
    assert QUEUE_RESOURCES.names == vocabulary.QUEUE_RESOURCES
    assert QUEUE_ENTRY.names == vocabulary.QUEUE_FIELDS


# --- every definition is used -----------------------------------------------------------------------


def _sites() -> list[dict]:
    kubeconfig = put(put(dev_config(), "cluster", {"kind": "kubeconfig"}), "gpuOperator.mode", "install")
    observed = put(dev_config(), "observability", {"prometheus": "external",
                                                   "external": {"releaseLabel": "prom", "url": "http://p:9090"}})
    signed_in = project_config(login_config(apiUrl="https://login.example.com/ui", rootUrl="https://g.example.com",
                                            autoLogin=True))
    backed_up = put(eks_config(), "backup", {"url": "s3://corp-backups/eks", "endpoint": "http://10.0.0.5:9000",
                                             "region": "us-east-2", "every": "6h", "keep": 3})
    return [dev_config(), eks_config(), kubeconfig, observed, signed_in, backed_up]


def test_every_declared_key_is_read_by_the_loader(monkeypatch):
    """A definition no reader uses would be accepted and silently ignored."""
    used: set[tuple[int, str]] = set()
    for method in ("read", "child", "entries"):
        original = getattr(Section, method)

        def recording(self, name, *args, _original=original, **kwargs):
            used.add((id(self.block), name))
            return _original(self, name, *args, **kwargs)

        monkeypatch.setattr(Section, method, recording)
    for raw in _sites():
        load_platform(raw, secrets_set={"kubeconfig", "sshPrivateKey", *BACKUP_SECRETS})
    unused = [f"{key.name} (of a block with {', '.join(block.names)})"
              for block in blocks() for key in block.keys if (id(block), key.name) not in used]
    assert unused == []


@pytest.mark.parametrize("path, required", [
    ("cluster.microk8s", False), ("teams[0].priority", False), ("teams[1].name", True), ("vcluster", False),
    ("teams[2]", False)])
def test_a_null_is_refused_at_its_key_and_not_read_as_unset(path, required):
    # The schema editors use refuses a null; read as "not set", a key written with nothing after it planned with
    # defaults, and only the site's schema test said so, without the key's fix.
    error = rejected(put(dev_config(), path, None))
    assert error.keys == [path]
    found = error.issues[0]
    assert found.value is None and str(found).startswith(f"gpu-tenancy:{path} = null: is empty")
    assert ("the key is required" in found.fix) == required
    assert (f"pulumi config rm --path 'gpu-tenancy:{path}'" in found.fix) != required

