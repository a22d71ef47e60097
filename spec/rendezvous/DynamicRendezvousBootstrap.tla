---------------------- MODULE DynamicRendezvousBootstrap ----------------------
(***************************************************************************)
(* The bootstrap store info that DynamicRendezvousHandler.next_rendezvous  *)
(* hands back after the join op (PyTorch 2.13, TCPStore sharing on, i.e.   *)
(* TORCH_DISABLE_SHARE_RDZV_TCP_STORE is not "1"), on top of the           *)
(* rendezvous protocol of DynamicRendezvous.  It lives outside the shared  *)
(* state: rank 0 writes MASTER_ADDR/MASTER_PORT into                       *)
(* PrefixStore("torch.rendezvous.<run_id>.<round>"), the other ranks read  *)
(* them from the same round's prefix (RendezvousStoreInfo.build).          *)
(*                                                                         *)
(* 2.13 builds the info once per handler, and again only when the node is  *)
(* rank 0 and has no TCPStore server yet (PR #182375).  This module        *)
(* records, per node, whether the info was built and whether a server was  *)
(* created, which rounds have MASTER_ADDR published, and which round a     *)
(* node is blocked on (store.get of MASTER_ADDR).  It adds no step of its  *)
(* own: the bookkeeping happens in the step where next_rendezvous returns  *)
(* (Finish of the join op), so every behaviour of DynamicRendezvous is a   *)
(* behaviour here.  What is abstracted: the port, get_free_port, the       *)
(* store.get timeout (DistStoreError) and the server's lifetime.           *)
(***************************************************************************)
EXTENDS DynamicRendezvous

VARIABLES
    infoBuilt,   \* infoBuilt[n]: handler._bootstrap_store_info is not None
    hasServer,   \* hasServer[n]: handler._shared_tcp_store_server is not None
    published,   \* rounds whose PrefixStore holds MASTER_ADDR
    awaiting     \* awaiting[n]: the round whose MASTER_ADDR n blocks on, or -1

bootVars == <<infoBuilt, hasServer, published, awaiting>>
allVars == <<vars, bootVars>>

\* n returns from next_rendezvous in this step (its join op finished).
Returns(n) == result[n] # "ok" /\ result'[n] = "ok"

\* 2.13's test for rebuilding the bootstrap info.  A fix may override it.
Rebuilds(n, rank) == ~infoBuilt[n] \/ (rank = 0 /\ ~hasServer[n])

BootInit ==
    /\ infoBuilt = [n \in Nodes |-> FALSE]
    /\ hasServer = [n \in Nodes |-> FALSE]
    /\ published = {}
    /\ awaiting = [n \in Nodes |-> -1]

\* The bookkeeping for one step of DynamicRendezvous.
BootStep ==
    IF \E n \in Nodes : Returns(n)
    THEN LET n == CHOOSE m \in Nodes : Returns(m)
             r == view'[n].round
             k == view'[n].ranks[n]
         IN IF Rebuilds(n, k)
            THEN /\ infoBuilt' = [infoBuilt EXCEPT ![n] = TRUE]
                 /\ IF k = 0
                    THEN \* _create_tcp_store_server, then build() sets MASTER_ADDR
                         /\ hasServer' = [hasServer EXCEPT ![n] = TRUE]
                         /\ published' = published \cup {r}
                         /\ awaiting' = [m \in Nodes |->
                                           IF awaiting[m] = r THEN -1 ELSE awaiting[m]]
                    ELSE \* build() as rank > 0: store.get(MASTER_ADDR) of round r
                         /\ UNCHANGED <<hasServer, published>>
                         /\ awaiting' = [awaiting EXCEPT ![n] = IF r \in published THEN -1 ELSE r]
            ELSE \* the cached info of an earlier round is returned as is
                 UNCHANGED bootVars
    ELSE \* a node that starts another next_rendezvous or crashes stops waiting
         /\ awaiting' = [m \in Nodes |->
                           IF pc'[m] # "idle" \/ result'[m] # "ok" THEN -1 ELSE awaiting[m]]
         /\ UNCHANGED <<infoBuilt, hasServer, published>>

BootSpec == BootInit /\ Init /\ [][FastNext /\ BootStep]_allVars

\* (Difference 7) No node waits for the MASTER_ADDR of a round whose rank 0
\* has already returned from next_rendezvous without publishing it (it never
\* will).  NOT guaranteed by 2.13, checked by a must-fail model.
BootstrapAddressInv ==
    \A n \in Nodes :
        awaiting[n] >= 0 =>
            ~\E m \in Nodes :
                /\ result[m] = "ok"
                /\ view[m].round = awaiting[n]
                /\ view[m].ranks[m] = 0
=============================================================================
