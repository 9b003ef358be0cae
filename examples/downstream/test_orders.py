import pytest


@pytest.mark.elr_profile("kafka")
def test_orders_survive_a_lossy_leader(elr_cluster):
    c = elr_cluster(brokers=3, replicas=[0, 1, 2], min_insync_replicas=2)
    assert c.produce(5).acked == 5
    c.isolate(0)
    c.isolate(1)
    c.power_off(2)
    c.expect(leader=None, isr=[], elr=[1, 2], lost=[2])
    c.heal()
    c.restart(2)
    assert not c.verdict().lost
