weir list
weir checkpoints clicks
