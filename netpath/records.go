package netpath

// attrTransactional is the transactional bit of a record batch's
// attributes (hasTransactionalBatches).
const attrTransactional = 0x10
