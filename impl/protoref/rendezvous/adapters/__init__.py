"""Stores behind one small protocol (:class:`.store.RendezvousStore`): in memory and on files
(:mod:`.store`, with :mod:`.wakeup`), and on etcd (:mod:`.etcd_store` over :mod:`.etcd_wire`
and :mod:`.etcd_watch`); throwaway etcd servers for tests (:mod:`.etcd_server`,
:mod:`.etcd_cluster`)."""
