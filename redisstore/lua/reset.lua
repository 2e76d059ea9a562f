-- Forget one key's state. KEYS[1]: the key. Returns {1} if it existed, else {0}.
return {redis.call('DEL', KEYS[1])}
