from pkg.sharding.state import ShardState, UsageLog


def shard(model):
    for p in model.parameters():
        p.shard_state = ShardState(p)
    model.usage = UsageLog()
