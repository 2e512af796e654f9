"""The topology model's own checks and derived views."""

import pytest

from numalab.cpumask import parse_cpulist
from numalab.errors import TopologyError
from numalab.topology.model import CPU, Node, Topology


def two_node_box():
    cpus = {}
    for c in range(8):
        core = c // 2
        cpus[c] = CPU(id=c, node=c // 4, package=c // 4, core=core,
                      thread_siblings=0b11 << (2 * core), cluster_cpus=0b11 << (2 * core),
                      package_cpus=0xF << (4 * (c // 4)))
    return Topology(name="box", possible=0xFF, present=0xFF, online=0xFF, cpus=cpus,
                    nodes={0: Node(0, 0x0F, 1 << 30), 1: Node(1, 0xF0, 1 << 30)},
                    distances=[[10, 21], [21, 10]])


def test_counts_and_distance():
    t = two_node_box().validate()
    assert t.counts() == {"pu": 8, "core": 4, "cluster": 4, "die": 2, "package": 2, "numa": 2}
    assert t.distance(0, 1) == 21 and t.distance(1, 1) == 10
    assert t.nr_cpu_ids == 8
    d = t.to_dict()
    assert d["nodes"][1]["cpus"] == [4, 5, 6, 7] and d["nodes"][1]["cpulist"] == "4-7"
    assert d["cpus"]["possible"] == list(range(8))


def test_default_distance_without_matrix():
    t = two_node_box().replace(distances=[])
    assert t.distance(0, 1) == 20 and t.distance(0, 0) == 10


@pytest.mark.parametrize("change, message", [
    ({"nodes": {0: Node(0, 0x1F), 1: Node(1, 0xF0)}}, "CPU 4 is in node0 and node1"),
    ({"distances": [[10, 21, 30], [21, 10, 30]]}, "not 2x2"),
    ({"distances": [[10, 0], [21, 10]]}, "node0->node1 is 0"),
    ({"present": 0x1FF}, "present CPUs are not all possible"),
])
def test_validate_rejects(change, message):
    with pytest.raises(TopologyError) as e:
        two_node_box().replace(**change).validate()
    assert message in str(e.value)


def test_memoryless_and_cpuless_nodes_are_fine():
    t = two_node_box()
    t = t.replace(nodes={**t.nodes, 2: Node(2, 0, 1 << 30), 3: Node(3, parse_cpulist(""), None)},
                  distances=[[10, 21, 30, 30], [21, 10, 30, 30], [30, 30, 10, 40], [30, 30, 40, 10]])
    assert t.validate().counts()["numa"] == 4
