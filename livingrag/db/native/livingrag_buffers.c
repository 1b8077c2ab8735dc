/*
 * livingrag_buffers: read a relation's pages into PostgreSQL's shared buffers.
 *
 * After a restart PostgreSQL's buffer cache is empty. An HNSW walk touches hundreds of random
 * index pages per match, and until a scope's whole index is back in the buffers nearly every one
 * of them is a read from the operating system, even with the files in its page cache. The embedded
 * server ships no pg_prewarm, so livingrag builds this one function at install time and creates it
 * in pg_temp of the owner's session that warms the store (livingrag/db/buffer_load.py).
 *
 *   livingrag_load_relation(rel regclass, max_blocks bigint) returns bigint
 *
 * reads blocks 0 .. min(nblocks, max_blocks) - 1 of the main fork through the buffer manager with
 * the default strategy (no ring buffer, so the pages stay), asking the kernel for the pages ahead,
 * and returns how many it read. A negative max_blocks reads them all. The caller needs SELECT on
 * the relation.
 */
#include "postgres.h"

#include "access/relation.h"
#include "catalog/pg_class.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

PG_MODULE_MAGIC;

#define LIVINGRAG_PREFETCH_DISTANCE 64

PG_FUNCTION_INFO_V1(livingrag_load_relation);

Datum
livingrag_load_relation(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	int64		max_blocks = PG_GETARG_INT64(1);
	Relation	rel;
	AclResult	aclresult;
	BlockNumber nblocks;
	BlockNumber block;

	rel = relation_open(relid, AccessShareLock);
	aclresult = pg_class_aclcheck(relid, GetUserId(), ACL_SELECT);
	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, get_relkind_objtype(rel->rd_rel->relkind), get_rel_name(relid));
	if (!RELKIND_HAS_STORAGE(rel->rd_rel->relkind))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("relation \"%s\" has no storage to load", get_rel_name(relid))));

	nblocks = RelationGetNumberOfBlocksInFork(rel, MAIN_FORKNUM);
	if (max_blocks >= 0 && (uint64) max_blocks < (uint64) nblocks)
		nblocks = (BlockNumber) max_blocks;

	for (block = 0; block < nblocks && block < LIVINGRAG_PREFETCH_DISTANCE; block++)
		PrefetchBuffer(rel, MAIN_FORKNUM, block);
	for (block = 0; block < nblocks; block++)
	{
		Buffer		buf;

		CHECK_FOR_INTERRUPTS();
		if (block + LIVINGRAG_PREFETCH_DISTANCE < nblocks)
			PrefetchBuffer(rel, MAIN_FORKNUM, block + LIVINGRAG_PREFETCH_DISTANCE);
		buf = ReadBufferExtended(rel, MAIN_FORKNUM, block, RBM_NORMAL, NULL);
		ReleaseBuffer(buf);
	}

	relation_close(rel, AccessShareLock);
	PG_RETURN_INT64((int64) nblocks);
}
