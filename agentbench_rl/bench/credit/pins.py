"""The sha256 of each standard credit set's arrays (``set.npz``), pinned in the code.

A set's ``set.json`` records its arrays' sha256, which catches a damaged or swapped file but not
a changed one sealed again (arrays edited, the sha256 in ``set.json`` rewritten): a standard set
whose arrays are not its pin is refused. A new standard set is pinned here in the commit that
ships it; ``tests/bench/test_credit.py`` checks every shipped set against its pin. A set of
one's own is read unpinned, and ``bench credit``'s card says so.
"""

from __future__ import annotations

PINS: dict[str, str] = {
    "alfworld-drrn-start": "31645e5c37ab1d42025e50040428b49c471a645c6c3d1599424c0ad536b74229",
    "alfworld-seen-undo-expert": "6181cfb8d408567f0a1430365b0cdfa60975563f1112c9e697a384fa1174cfbf",
    "alfworld-unseen-undo-expert": (
        "5ec3c950a97e7da5bb34ae0377c75cdb07d255efc182cf9943411226629adc88"
    ),
    "mdp-aliased": "fdc1ef0e5d63e4493ab21c3fb27a322f6745acba8723d3274aab39dcaeea00b4",
    "mdp-branching": "a6fd57bf8d7d3846b9bbe396fdb8550a5d67f2e6def9b853ccbf6f27961cfd5f",
    "mdp-dense-anchors": "227f7378e57f084068a42239f826fc5c2be06ec27e9c034be1403bd0ae1a4816",
    "mdp-detours": "60ae7e5d5e8792bcdc960b378ee81ed73582004e72318597334f261195c87fed",
    "mdp-history-credit": "7b6964476bbdf6df98cb2ef8489a9f6e5a5adbca592f9bfbd2d1f79c9d26ee08",
    "mdp-lucky-rare": "fed2d16c9187ec902e86547761300a9a627cfa4f01219e6cc8ed28df5c4e7028",
    "mdp-recent-cue": "8a205b36aa9df27927f971911cff5bb0243c7d9f07a2e83f6c624cb8ea2528dd",
    "mdp-sparse-anchors": "8e32fc6d55cb19082028793a32dbd3f555a38c47fcd1e19e20f5e27cfdddd733",
    "sokoban-drrn-mid": "3274d7c30895cb1ba78902288879e29a93b781c2745cf1954e5070dedab8978c",
    "sokoban-drrn-start": "7603aa6ef6086dd89e00e0590568c8e8290ef9513b4ad84f34625b0fa6aeb629",
    "textcraft-drrn-start": "893807ca81d4b64fd2e12a8e3c9afe85b9dd9897bd3b331080a01861db4c8ab2",
    "textcraft-noisy0.6-expert": "35e61142ddcf8e15c1de37970a4a790196eb3090707d0cf6846f2d306841e0f1",
    "textcraft-noisy0.9-expert": "0b2793f36d8998ce39d2257b2e4cbf12f7a9af21ab7c9588ce3e1e9cae2574f8",
    "textcraft-noisy0.95-expert": (
        "077cc6f0f590b9ea34250277c9a5776e13f9888811d581b7d478f2eb45975ade"
    ),
    "webshop-noisy0.3-expert": "c75d51e0904d0c77e40ce06d4e8e258f6bef51d9c55f8e2cbcb60601aae46aa9",
    "webshop-noisy0.3-rule": "42ea2fe7fa8df60758f46457030b4937255ae650657b0d5e2c40b0775d46c538",
    "webshop-noisy0.6-expert": "891e45a95622e1863396fa4c0a8c2f048cf6b0d939bc38c01117115dd7a0beac",
}
